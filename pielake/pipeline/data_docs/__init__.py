"""pielake's additions to Great Expectations' Data Docs (`pielake.pipeline.gx_project` says why)."""
