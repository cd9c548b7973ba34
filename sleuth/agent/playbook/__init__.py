"""The offline investigator: no language model, a fixed plan per question family.

`brain.PlaybookBrain` routes a question through `registry` to a family (one module
each: mtp, quant, arch, engine, env, serve, capacity; more from plugins), whose plan
is written with the pieces in `plan`. Each module is imported by name; nothing is
re-exported here.
"""
