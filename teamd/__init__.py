"""teamd: a supervisor that runs a team of Claude agents as real OS processes.

The package is the library both sides share: `teamctl` writes the files described in
CONTRACT.md through it, and `teamd run` plus the teammates it forks read and react to them.
Nothing here imports `anthropic` except `teamd.agent` and `teamd.supervisor`.
"""

__version__ = "0.1.0"
