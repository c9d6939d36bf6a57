"""SyncBatchNorm: batch normalization whose batch statistics are those of every rank's batch
together (Horovod's hvd.SyncBatchNorm, a drop-in for torch.nn.BatchNorm*d).

Forward all-reduces each channel's count, sum and sum of squares; backward all-reduces the sums of
dy and dy * x_hat, so the input gradient is that of one batch norm over the union of the batches.
The weight and bias gradients stay this rank's (DistributedOptimizer averages them as any other).
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from dtrain.torch import basics
from dtrain.torch.mpi_ops import Sum, allreduce_async_, synchronize


def _stat_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _summed(tensor, name):
    return synchronize(allreduce_async_(tensor, op=Sum, name=name))


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, name):
        channels = x.shape[1]
        dims = [d for d in range(x.dim()) if d != 1]
        xs = x.to(_stat_dtype(x.dtype))
        count = torch.tensor([x.numel() // channels], dtype=xs.dtype, device=x.device)
        stats = torch.cat([xs.sum(dims), (xs * xs).sum(dims), count])
        stats = _summed(stats, f"{name}.forward")
        total = stats[-1]
        mean = stats[:channels] / total
        var = (stats[channels:2 * channels] / total - mean * mean).clamp_(min=0)
        if running_mean is not None:
            unbiased = var * (total / (total - 1)) if total > 1 else var
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        shape = [1, channels] + [1] * (x.dim() - 2)
        invstd = torch.rsqrt(var + eps)
        x_hat = (xs - mean.view(shape)) * invstd.view(shape)
        y = x_hat
        if weight is not None:
            y = y * weight.to(xs.dtype).view(shape) + bias.to(xs.dtype).view(shape)
        ctx.save_for_backward(x_hat, invstd, weight, total)
        ctx.name = name
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x_hat, invstd, weight, total = ctx.saved_tensors
        channels = x_hat.shape[1]
        dims = [d for d in range(x_hat.dim()) if d != 1]
        shape = [1, channels] + [1] * (x_hat.dim() - 2)
        dys = dy.to(x_hat.dtype)
        local = torch.cat([dys.sum(dims), (dys * x_hat).sum(dims)])
        grad_weight = grad_bias = None
        if weight is not None:
            grad_bias = local[:channels].to(weight.dtype)
            grad_weight = local[channels:].to(weight.dtype)
        sums = _summed(local.clone(), f"{ctx.name}.backward")
        mean_dy = (sums[:channels] / total).view(shape)
        mean_dy_xhat = (sums[channels:] / total).view(shape)
        scale = invstd if weight is None else invstd * weight.to(x_hat.dtype)
        dx = (dys - mean_dy - x_hat * mean_dy_xhat) * scale.view(shape)
        return dx.to(dy.dtype), grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """torch.nn.BatchNorm*d with the batch statistics of all ranks (any input of 2 or more
    dimensions, channels second). In eval mode, or on one rank, it is plain batch norm."""

    _instances = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        # Each layer's all-reduces go under a name of its own; layers are built in one order on
        # every rank.
        self._dtrain_name = f"sync_batch_norm.{SyncBatchNorm._instances}"
        SyncBatchNorm._instances += 1

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch = self.training or not self.track_running_stats
        if not use_batch or basics.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, use_batch, factor,
                                self.eps)
        running = self.training and self.track_running_stats
        return _SyncBatchNorm.apply(input, self.weight, self.bias, self.running_mean if running else None,
                                    self.running_var if running else None, self.eps, factor, self._dtrain_name)
