"""Where Spark runs for pielake: sessions built the one way, local checkpoints, progress lines, Python workers."""
