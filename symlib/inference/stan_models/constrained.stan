// One-hidden-layer ReLU regression network with ordered hidden biases and a unit-norm incoming
// weight vector per hidden unit, last layer free (Pourzanjani et al. 2017, Theorems 3.1-3.2).
//   y_n = W2' relu(W1 x_n + b1) + b2 + sigma * eps_n,   ||W1[h, :]|| = 1,   b1 ordered.
// Row h of W1 comes from D - 1 spherical angles: the first, t_1 = atan2(p_h[2], p_h[1]), from an
// auxiliary 2-D point p_h ~ N(0, I) (so t_1 wraps around without a boundary), the others
// t_2..t_{D-1} in (-pi/2, pi/2):
//   w_1 = prod_k cos t_k,   w_{k+1} = sin t_k prod_{j>k} cos t_j.
// With angle_jacobian = 1 the change of measure sum_{k=2}^{D-1} (k-1) log cos t_k is added, so
// the implied prior on each row is uniform on the sphere; the authors' file leaves it out.
// Every term is written with target += *_lpdf so the log density keeps its normalising constants.
functions {
  vector unit_vector_from_angles(real t1, row_vector rest) {
    int D = cols(rest) + 2;
    vector[D - 1] t;
    vector[D] w;
    real tail = 1;    // prod_{j > k} cos t_j
    t[1] = t1;
    for (k in 2:(D - 1)) {
      t[k] = rest[k - 1];
    }
    for (i in 1:(D - 1)) {
      int k = D - i;
      w[k + 1] = sin(t[k]) * tail;
      tail *= cos(t[k]);
    }
    w[1] = tail;
    return w;
  }
}
data {
  int<lower=2> N;
  int<lower=2> D;
  int<lower=1> H;
  matrix[N, D] X;
  vector[N] y;
  int<lower=0, upper=1> w_laplace;   // 1: Laplace(0, w_scale) on W2, 0: normal(0, w_scale)
  real<lower=0> w_scale;
  real<lower=0> sigma_scale;         // half-normal(0, sigma_scale) on the noise sd
  int<lower=0, upper=1> angle_jacobian;
}
transformed data {
  matrix[N, D + 1] X1 = append_col(X, rep_vector(1, N));   // the inputs with a column of ones
}
parameters {
  array[H] vector[2] p;
  matrix<lower=-pi() / 2, upper=pi() / 2>[H, D - 2] t;
  ordered[H] b1;
  vector[H] W2;
  real b2;
  real<lower=0> sigma;
}
transformed parameters {
  matrix[H, D] W1;
  for (h in 1:H) {
    W1[h] = unit_vector_from_angles(atan2(p[h][2], p[h][1]), t[h])';
  }
}
model {
  // hidden activations relu(X W1' + b1) as one product with the bias column of [X, 1]: a matrix
  // expression, not N x H scalar ones, so each gradient takes about half the time
  matrix[N, H] act = fmax(X1 * append_col(W1, b1)', 0);
  for (h in 1:H) {
    target += normal_lpdf(p[h] | 0, 1);
  }
  if (angle_jacobian) {
    for (j in 1:(D - 2)) {
      target += j * sum(log(cos(col(t, j))));
    }
  }
  if (w_laplace) {
    target += double_exponential_lpdf(W2 | 0, w_scale);
  } else {
    target += normal_lpdf(W2 | 0, w_scale);
  }
  target += normal_lpdf(b1 | 0, 1);
  target += normal_lpdf(b2 | 0, 1);
  target += normal_lpdf(sigma | 0, sigma_scale) + log2();
  target += normal_lpdf(y | act * W2 + b2, sigma);
}
