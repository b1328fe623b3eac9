"""Spark on Ray (RayDP) pipelines that load, compact and analyse shoal's state logs."""
