"""Running a release: progress bars, stop signals, tasks in worker processes, and optional packages."""
