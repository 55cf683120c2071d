"""The durable run state under ``OUT/.ocrflow``: work items, leases, done markers, page
checkpoints and run records. Every executor resumes from it."""
