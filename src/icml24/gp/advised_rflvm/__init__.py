"""advisedRFLVM (Li, Lin, Yin, Zhang, ICML 2024, https://arxiv.org/abs/2404.01697): preventing model collapse in
GPLVMs with a learned projection variance and a spectral-mixture kernel approximated by differentiable random
Fourier features.

* :class:`AdvisedRFLVM`: the model as a scikit-learn transformer with ``impute`` for missing entries.
* :func:`rflvm_elbo`: the paper's one-sample ELBO; :func:`rflvm_official_loss`: the official code's loss (ablation).
* :func:`linear_gplvm_closed_form`, :func:`linear_gplvm_loglik`: the linear-GPLVM collapse analysis.
"""

from icml24.gp.advised_rflvm.linear import linear_gplvm_closed_form, linear_gplvm_loglik
from icml24.gp.advised_rflvm.model import AdvisedRFLVM, rflvm_elbo, rflvm_official_loss

SLUG = "advised-rflvm"

__all__ = [
    "SLUG",
    "AdvisedRFLVM",
    "linear_gplvm_closed_form",
    "linear_gplvm_loglik",
    "rflvm_elbo",
    "rflvm_official_loss",
]
