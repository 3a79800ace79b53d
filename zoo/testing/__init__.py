"""Tools for checking the zoo across backends: run a command once per Keras
backend (`zoo.testing.backends`), compare what a recipe's model does on
each (`zoo.testing.cross_backend`), and the plumbing of the per-backend
benchmarks in `benchmarks/` (`zoo.testing.benchmarks`)."""
