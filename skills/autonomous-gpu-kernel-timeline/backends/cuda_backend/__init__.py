"""CUDA backend of the timeline skill: the probe header and its cupy adapter."""
