"""ffn_research: feed-forward networks in transformers, studied empirically (see README.md).

`ffn_research.load_run(run_dir)` -> (resolved config, model with trained weights, summary).
"""


def __getattr__(name: str):
  if name == 'load_run':  # imported on first use: `import ffn_research.config` stays light
    from ffn_research.loop import load_run

    return load_run
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
