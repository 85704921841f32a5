// Turns on the dark theme for the settings screen.
defineClass("SettingsViewController", {
  viewDidLoad: function() {
    self.ORIGviewDidLoad();
    self.view().setBackgroundColor(UIColor.blackColor());
  }
});
