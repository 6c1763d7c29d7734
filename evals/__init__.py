"""Eval suites (hle, frames, healthbench) on the async engine."""
