"""The `chat` suite: one chat call per sample to the model under test (suite.py); no templates, no bundled data."""
