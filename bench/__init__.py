"""Benchmarks: ratios against a bound or a baseline measured in the same run, printed as tables."""
