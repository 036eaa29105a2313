"""The one executor under both API faces: plans, environments, processes, runs, trials and the tuner."""
