// One-hidden-layer ReLU regression network with ordered hidden biases (Pourzanjani et al. 2017,
// Theorem 3.1): one representative of every permutation class of hidden units.
//   y_n = W2' relu(W1 x_n + b1) + b2 + sigma * eps_n
// Every term is written with target += *_lpdf so the log density keeps its normalising
// constants: symlib.identifiable reproduces it exactly in torch.
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> H;
  matrix[N, D] X;
  vector[N] y;
  int<lower=0, upper=1> w_laplace;   // 1: Laplace(0, w_scale) on weights, 0: normal(0, w_scale)
  real<lower=0> w_scale;
  real<lower=0> sigma_scale;         // half-normal(0, sigma_scale) on the noise sd
}
transformed data {
  matrix[N, D + 1] X1 = append_col(X, rep_vector(1, N));   // the inputs with a column of ones
}
parameters {
  matrix[H, D] W1;
  ordered[H] b1;
  vector[H] W2;
  real b2;
  real<lower=0> sigma;
}
model {
  // hidden activations relu(X W1' + b1) as one product with the bias column of [X, 1]: a matrix
  // expression, not N x H scalar ones, so each gradient takes about half the time
  matrix[N, H] act = fmax(X1 * append_col(W1, b1)', 0);
  if (w_laplace) {
    target += double_exponential_lpdf(to_vector(W1) | 0, w_scale);
    target += double_exponential_lpdf(W2 | 0, w_scale);
  } else {
    target += normal_lpdf(to_vector(W1) | 0, w_scale);
    target += normal_lpdf(W2 | 0, w_scale);
  }
  target += normal_lpdf(b1 | 0, 1);
  target += normal_lpdf(b2 | 0, 1);
  target += normal_lpdf(sigma | 0, sigma_scale) + log2();
  target += normal_lpdf(y | act * W2 + b2, sigma);
}
