// Fixes the login button that stays disabled after a failed attempt.
defineClass("LoginViewController", {
  loginFailed: function(error) {
    self.ORIGloginFailed(error);
    self.loginButton().setEnabled(true);
  }
});
