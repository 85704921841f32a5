// Shows a promotion banner. Published with a missing closing bracket.
defineClass("HomeViewController", {
  viewDidAppear: function(animated) {
    self.ORIGviewDidAppear(animated);
    self.showBanner("spring-sale");
  }
);
