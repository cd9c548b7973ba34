"""Fleet calls: one tool on every host of a group (`host="@decode"`), answered as one result
that groups the hosts by what they answered.

- `view`: the groups and hosts a session may fan out to, from its session_started.
- `consent`: a mutating tool is fanned out only under a rule that names the group.
- `normalise`: what counts as the same output (the masks).
- `grouping`: the hosts grouped by answer, and the text the model reads.
- `run`: the fan-out, each host's call through the one call pipeline (`agent/calls.py`).
"""
