"""One module per chapter: ``run(config, ...) -> results`` plus its tables, claims and figures."""
