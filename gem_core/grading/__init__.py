"""Graders of the task envs: math answers (`math`), QA answers (`qa`) and programs (`code`).

Each submodule is imported on use; none is imported by ``import gem_core``.
"""
