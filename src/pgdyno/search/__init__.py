"""``pgdyno tune --search``: a noise-aware search over PostgreSQL settings.

space (what is searched), objective (one trial = one bench run), study (Optuna's state in
the search's directory), select (re-runs of the leading candidates), confirm (the final
interleaved comparison), report, run (the whole search, resumable), and command (`pgdyno
tune`'s values as the search's options).
"""
