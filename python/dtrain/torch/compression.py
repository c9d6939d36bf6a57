"""Gradient compression on the wire: Horovod's `Compression.none` and `Compression.fp16`, and
`Compression.bf16`, which Horovod lacks. A compressor's compress(tensor) returns the tensor to send
and a context; decompress(tensor, ctx) restores the dtype. Only floating-point tensors are cast."""
import torch


class Compressor:
    """The interface of a user's compressor, as in Horovod."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _casting(wire_dtype):
    class _CastCompressor(Compressor):
        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating_point and tensor.dtype != wire_dtype:
                return tensor.to(wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tensor.to(ctx)

    return _CastCompressor


FP16Compressor = _casting(torch.float16)
FP16Compressor.__name__ = FP16Compressor.__qualname__ = "FP16Compressor"
BF16Compressor = _casting(torch.bfloat16)
BF16Compressor.__name__ = BF16Compressor.__qualname__ = "BF16Compressor"


class Compression:
    """`compression=Compression.fp16` in allreduce and DistributedOptimizer."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
