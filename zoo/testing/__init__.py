"""Tools for checking the zoo across backends: run a command once per Keras
backend (`zoo.testing.backends`) and compare what a recipe's model does on
each (`zoo.testing.cross_backend`)."""
