"""Screens the console pushes over the dashboard: help, confirmation, the kernel timeline."""
