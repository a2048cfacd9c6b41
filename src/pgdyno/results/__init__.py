"""Run directories, their manifests and the index of all runs."""
