"""``ocrflow serve``: a job service (REST API, job database, workers) over the run machinery.

A job is a run into ``ROOT/jobs/<id>/out``: its documents and pages live in that workspace,
the database only mirrors jobs, owners, options and progress (and is rebuilt from the job
folders if lost). See docs/serve.md.
"""
