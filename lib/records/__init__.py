"""Encoded records and what is read off them: the public domain, counting marginals, edit rules' boxes,
exchanging values among records, and linking rows into individuals."""
