"""PostgreSQL: sources (Debian source packages, tarballs, trees), builds keyed and cached with
a completion marker, the installation noun, clusters and servers on private sockets, a
throwaway cluster for questions, and the settings catalogue and its page-size policy.

The bottom of the run's way beside storage and store: may import only the shared nouns at the root.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
