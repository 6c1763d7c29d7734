"""The async task engine, results store, tee logs and profile events."""
