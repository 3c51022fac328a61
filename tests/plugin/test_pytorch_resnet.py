"""The loader of DALI's PyTorch ResNet-50 example, ported by changing only the imports.

The pipeline and the training-loop lines that touch the loader are the example's (``dali_cpu``
branch, crop size 64 instead of 224 to keep the test fast); the data is one shard of the shared
flower photos (200 photos in 12 shards: 16 or 17 per shard; shards rotate every epoch) and a tiny
model trains on it.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from jaxdali import fn, pipeline_def, types  # noqa: E402  (was: from nvidia.dali import ...)
from jaxdali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy  # noqa: E402
from jaxdali.plugin.pytorch import DALIGenericIterator  # noqa: E402

CROP = 64
BATCH = 6  # shards of 16 or 17 photos: batches of 6, 6 and a partial 4 or 5
NUM_SHARDS = 12
SHARD_ID = 2


@pipeline_def(exec_dynamic=True)
def create_dali_pipeline(data_dir, crop, size, shard_id, num_shards, dali_cpu=False, is_training=True):
    images, labels = fn.readers.file(file_root=data_dir,
                                     shard_id=shard_id,
                                     num_shards=num_shards,
                                     random_shuffle=is_training,
                                     pad_last_batch=True,
                                     name="Reader")
    dali_device = 'cpu' if dali_cpu else 'gpu'
    decoder_device = 'cpu' if dali_cpu else 'mixed'
    # ask HW NVJPEG to allocate memory ahead for the biggest image in the data set to avoid reallocations in runtime
    preallocate_width_hint = 5980 if decoder_device == 'mixed' else 0
    preallocate_height_hint = 6430 if decoder_device == 'mixed' else 0
    if is_training:
        images = fn.decoders.image_random_crop(images,
                                               device=decoder_device, output_type=types.RGB,
                                               preallocate_width_hint=preallocate_width_hint,
                                               preallocate_height_hint=preallocate_height_hint,
                                               random_aspect_ratio=[0.8, 1.25],
                                               random_area=[0.1, 1.0],
                                               num_attempts=100)
        images = fn.resize(images,
                           device=dali_device,
                           resize_x=crop,
                           resize_y=crop,
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = fn.random.coin_flip(probability=0.5)
    else:
        images = fn.decoders.image(images,
                                   device=decoder_device,
                                   output_type=types.RGB)
        images = fn.resize(images,
                           device=dali_device,
                           size=size,
                           mode="not_smaller",
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = False

    images = fn.crop_mirror_normalize(images.gpu(),
                                      dtype=types.FLOAT,
                                      output_layout="CHW",
                                      crop=(crop, crop),
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                      std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                      mirror=mirror)
    labels = labels.gpu()
    return images, labels


@pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
def labels_only(data_dir, shard_id, num_shards):
    _, labels = fn.readers.file(file_root=data_dir, shard_id=shard_id, num_shards=num_shards,
                                random_shuffle=True, pad_last_batch=True, name="Reader")
    return labels


def reader_labels(data_dir, epochs):
    """Sorted labels of each epoch of the same reader shard, without decoding anything."""
    pipe = labels_only(data_dir, SHARD_ID, NUM_SHARDS)
    try:
        it = DALIGenericIterator(pipe, ["label"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                 auto_reset=True)
        return [sorted(v for batch in it for v in batch[0]["label"].flatten().tolist()) for _ in range(epochs)]
    finally:
        pipe.close()


class TinyNet(torch.nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.fc = torch.nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


@pytest.mark.slow
def test_resnet_example_loader_trains_a_model_on_real_photos(flowers_root):
    torch.manual_seed(0)
    expected_labels = reader_labels(flowers_root, epochs=2)
    pipe = create_dali_pipeline(batch_size=BATCH,
                                num_threads=2,
                                device_id=0,  # JAX's first device: the CPU on a CPU-only host
                                seed=12 + 0,
                                data_dir=flowers_root,
                                crop=CROP,
                                size=CROP + CROP // 7,
                                dali_cpu=True,
                                shard_id=SHARD_ID,
                                num_shards=NUM_SHARDS,
                                is_training=True)
    try:
        pipe.build()
        train_loader = DALIClassificationIterator(pipe, reader_name="Reader",
                                                  last_batch_policy=LastBatchPolicy.PARTIAL,
                                                  auto_reset=True)
        model = TinyNet()
        criterion = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        before = [p.detach().clone() for p in model.parameters()]

        for epoch in range(2):
            # As in the example's train(): the loader length comes from `_size`.
            train_loader_len = int(math.ceil(train_loader._size / BATCH))
            seen_labels, sizes = [], []
            for i, data in enumerate(train_loader):
                input = data[0]["data"]
                target = data[0]["label"].squeeze(-1).long()

                assert input.dtype == torch.float32 and input.device.type == "cpu"
                assert input.shape[1:] == (3, CROP, CROP) and input.shape[0] == target.shape[0]
                assert torch.isfinite(input).all() and input.abs().max() < 3.0  # (x - mean) / std of [0, 255]
                sizes.append(target.shape[0])
                seen_labels += target.tolist()

                output = model(input)
                loss = criterion(output, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                assert math.isfinite(loss.item())

            expected = expected_labels[epoch]
            assert sorted(seen_labels) == expected  # PARTIAL: every photo of the shard exactly once
            assert len(sizes) == train_loader_len == 3
            assert sizes[:2] == [BATCH, BATCH] and sizes[2] == len(expected) - 2 * BATCH

        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    finally:
        pipe.close()
