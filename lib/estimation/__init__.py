"""Estimators: records or distributions fitted to noisy answers, and noisy answers denoised.  Post-processing
only: everything here reads released answers, synthetic records and public data, never private data.  Each
estimator takes its answers as ``measurement.Target`` records."""
