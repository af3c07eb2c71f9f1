"""Running a release: progress bars, stop signals, tasks in worker processes, BLAS on one thread, and optional
packages."""
