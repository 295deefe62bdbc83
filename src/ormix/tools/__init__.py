"""ORS tool specs as Python methods TRL can show the model: schema walking, type hints, names, binding."""
