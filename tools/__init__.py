"""Developer tools: the offline preview, golden-file regeneration and the preview benchmark."""
