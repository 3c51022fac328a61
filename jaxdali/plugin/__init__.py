"""Framework plugins: iterators that turn pipeline outputs into JAX arrays or torch tensors."""
