"""The privacy side, in one place: accounting (zCDP conversion and the ledger), exact samplers,
mechanisms, contribution bounding, the closed set of queries, and the private table that is
the only door to private data (see PRIVACY.md)."""
