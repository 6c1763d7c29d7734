"""A run dir in the tracking tools people already use, the formats that are not a suite's own: MLflow (a
tracking server, mlflow_export.py) and W&B (offline files, wandb_export.py), both from one view of the run
(run_view.py). A suite's own format (ToolOrchestra's per-task files, τ²-bench's results) lives in its
package under evals/."""
