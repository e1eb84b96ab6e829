"""GPU sampling through NVML for the console's GPU pane."""
