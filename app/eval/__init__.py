"""`moa-chat eval`: tasks, checks, the run, the judge, the statistics and the report (core: no Textual)."""
