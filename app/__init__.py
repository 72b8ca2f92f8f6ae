"""The browser UI (Gradio); it calls the engine and never the model directly."""
