"""A run dir in the tracking tools people already use: MLflow (a tracking server) and W&B (offline files).

view.py decides what a run is in those terms (params, metrics, artifacts) without importing either
package; mlflow_export.py and wandb_export.py write it, each importing its package only when called.
"""
