"""The foundation below the operators: checkpoint-format errors and field checks, host batch buffers."""
