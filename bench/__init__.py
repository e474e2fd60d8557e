"""teamd's benchmarks: `python -m bench` runs them all (see bench/suite.py); each figure is
measured next to a small re-creation of the seed design (bench/baselines/) in the same run.
"""
