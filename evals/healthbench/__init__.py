"""HealthBench (`ops eval healthbench`): a candidate response per example, then one judge call per rubric item.

    dataset.py   HealthBench's JSONL (prompt, rubrics with points and tags, ideal completions), checked per line
    grading.py   the grader prompt and the judge's JSON verdict, re-asked up to the bound, else a grader error
    scoring.py   the scores as simple-evals computes them: per example, overall, per tag, a seeded bootstrap
    suite.py     the suite: units of work are rubric items, so the judge's concurrency is used whole
    templates/   the grader prompt; data/ the bundled synthetic set

The reference is ../shared/reference/scoring.md.
"""
