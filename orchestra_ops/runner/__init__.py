"""The async eval engine and everything a run leaves in its run dir.

    runs/<suite>-<topology>/
      run.json        what the run is (suite, dataset, routing source), so eval-status can diff
      results.jsonl   one line per finished task (ResultsStore; resume reads it)
      eval.log        everything the console showed (TeeLog), line-buffered
      profile.jsonl   one event per model call (ProfileWriter)

    engine.py   the task loop: a semaphore, per-task deadlines, Ctrl-C handling
    evalrun.py  one `ops eval`: dataset + store + fleet + suite wired together
"""
