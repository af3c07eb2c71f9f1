"""Evaluation against real data (scoring, classifier utility, the HTML report, evaluation binning).

It reads real data, so none of its numbers are differentially private; a release never uses it."""
