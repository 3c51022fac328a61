"""The iterators' error and warning texts, in one place.

DALI's texts are kept word for word because users match on them (``spec/dali_jax_plugin.md`` §7);
the code in the trailing comment (E1, W2, ...) is the spec's number for each.
"""

NO_PIPELINES_MSG = "Number of provided pipelines has to be at least 1"  # E1
SAME_BATCH_SIZE_MSG = "All pipelines should have the same batch size set"  # E6
SIZE_ZERO_MSG = "Size cannot be 0"  # E8
NEGATIVE_SIZE_MSG = "Negative size is supported only for a single pipeline"  # E9
READER_AND_SIZE_MSG = "When reader_name is provided, size should not be set"  # E10
READER_AND_PADDED_MSG = "When reader_name is provided, last_batch_padded should not be set"  # E11
NO_DATA_MSG = (  # E14
    "It seems that there is no data in the pipeline. This may happen if `last_batch_policy` is set "
    "to PARTIAL and the requested batch size is greater than the shard size."
)
MIXED_CHECKPOINTING_MSG = (  # E15
    "All wrapped pipelines must have the same value for `enable_checkpointing`."
)
VARIABLE_BATCH_MSG = (  # E16
    "Variable batch size is not supported by the iterator when reader_name is provided or iterator "
    "size is set explicitly"
)
CHECKPOINTING_DISABLED_MSG = "Cannot access checkpoints with checkpointing disabled"  # E21
ITERATOR_DATA_NOT_JSON_MSG = (  # E24 (iterator side)
    "Iterator checkpoint data is not a valid JSON string. "
    "Please make sure that the checkpoint was created with the same version of jaxdali."
)
# W1 and W3 contain a run of spaces in DALI (a line continuation inside the string literal).
RESET_MID_EPOCH_MSG = (  # W1
    "DALI iterator does not support resetting while epoch is not finished. " + " " * 29 + "Ignoring..."
)
MANUAL_SIZE_MSG = (  # W2
    "Please set `reader_name` and don't set last_batch_padded and size manually whenever possible. "
    "This may lead, in some situations, to missing some samples or returning duplicated ones. "
    "Check the Sharding section of the documentation for more details."
)
FILL_LAST_BATCH_MSG = (  # W3
    "Please do not use `fill_last_batch` and use `last_batch_policy` " + " " * 27 + "instead."
)
PARTLY_RESTORED_MSG = (
    "Some, but not all of the pipelines used were restored from checkpoint. "
    "This iterator might produce unexpected results."
)
DIFFERENT_ITERATOR_DATA_MSG = (
    "The provided pipelines had different iterator data in the checkpoints they were restored "
    "from. This iterator might produce unexpected results."
)
NO_ITERATOR_DATA_MSG = (
    "Iterator data was not saved in the checkpoint. This iterator might produce unexpected results."
)
INEXACT_MASK_MSG = (
    "The padding mask cannot count every sample exactly once per epoch here: with "
    "last_batch_policy=FILL and pad_last_batch=False, a shard that does not fill whole batches reads "
    "into the next epoch, so later epochs can lack samples (and, with several shards, hold one twice). "
    "For exact evaluation, give the reader pad_last_batch=True."
)
