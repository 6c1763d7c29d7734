"""The async eval engine and everything a run leaves in its run dir.

    runs/<suite>-<topology>/
      run.json        the manifest: suite, options, dataset and id hashes, template hashes, judge,
                      routing, ops version (manifest.py), so --resume needs no flags and `ops compare`
                      can prove two runs did the same work
      results.jsonl   one compact line per finished unit (ResultsStore; resume reads it)
      eval.log        everything the console showed (TeeLog), line-buffered
      profile.jsonl   one event per model call and per tool call (ProfileWriter)
      scores.json     the suite's scores over the final record of every unit
      analysis/       `ops analyze` (stats.json, plots, report.html)

    suite.py     the interface a suite implements (options, templates, hooks) and its task context
    templates.py prompt templates as data files, hashed
    options.py   EvalOptions (what a run is asked to do) and PreparedRun (what prepare made of it)
    prepare.py   everything checked before the first request: options, routing, dataset, units to run
    evalrun.py   one `ops eval`: build (fleet + store + profile + suite wired together), loop, finish (scores)
    evalloop.py  the asyncio main of a run: signals, ticker, every unit recorded as it finishes
    engine.py    the task loop: a semaphore, per-task deadlines, Ctrl-C handling
    context.py   what a suite calls for one unit (chat, retrieve, execute, record); toolbox.py behind it
"""
