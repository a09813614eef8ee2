// energy/carbon_regions.cpp: see carbon_regions.h (figures copied from the cited table).
#include "energy/carbon_regions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace gt::energy {

namespace {

std::string upper(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Levenshtein distance of two short strings.
std::size_t edits(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<CountryIntensity>& country_intensities() {
  // iso_code, country_name, carbon_intensity of global_energy_mix.json (year 2021).
  static const std::vector<CountryIntensity> table = {
      {"ABW", "Aruba", 591.398},
      {"AFG", "Afghanistan", 120.482},
      {"AGO", "Angola", 195.983},
      {"ALB", "Albania", 23.437},
      {"ARE", "United Arab Emirates", 461.845},
      {"ARG", "Argentina", 357.786},
      {"ARM", "Armenia", 222.678},
      {"ASM", "American Samoa", 687.5},
      {"ATG", "Antigua and Barbuda", 657.143},
      {"AUS", "Australia", 531.247},
      {"AUT", "Austria", 147.573},
      {"AZE", "Azerbaijan", 532.902},
      {"BDI", "Burundi", 250.0},
      {"BEL", "Belgium", 156.922},
      {"BEN", "Benin", 666.667},
      {"BFA", "Burkina Faso", 611.429},
      {"BGD", "Bangladesh", 555.914},
      {"BGR", "Bulgaria", 354.334},
      {"BHR", "Bahrain", 489.77},
      {"BHS", "Bahamas", 698.113},
      {"BIH", "Bosnia and Herzegovina", 489.643},
      {"BLR", "Belarus", 415.641},
      {"BLZ", "Belize", 484.375},
      {"BOL", "Bolivia", 312.559},
      {"BRA", "Brazil", 158.592},
      {"BRB", "Barbados", 644.86},
      {"BRN", "Brunei", 658.849},
      {"BTN", "Bhutan", 24.444},
      {"BWA", "Botswana", 794.521},
      {"CAF", "Central African Republic", 0.0},
      {"CAN", "Canada", 128.461},
      {"CHE", "Switzerland", 47.101},
      {"CHL", "Chile", 416.881},
      {"CHN", "China", 544.355},
      {"CIV", "Cote d'Ivoire", 410.747},
      {"CMR", "Cameroon", 278.261},
      {"COD", "Democratic Republic of Congo", 25.362},
      {"COG", "Congo", 395.522},
      {"COK", "Cook Islands", 400.0},
      {"COL", "Colombia", 181.065},
      {"COM", "Comoros", 714.286},
      {"CPV", "Cape Verde", 600.0},
      {"CRI", "Costa Rica", 33.045},
      {"CUB", "Cuba", 602.025},
      {"CYM", "Cayman Islands", 684.932},
      {"CYP", "Cyprus", 599.609},
      {"CZE", "Czechia", 405.589},
      {"DEU", "Germany", 365.477},
      {"DJI", "Djibouti", 666.667},
      {"DMA", "Dominica", 529.412},
      {"DNK", "Denmark", 221.416},
      {"DOM", "Dominican Republic", 550.881},
      {"DZA", "Algeria", 498.904},
      {"ECU", "Ecuador", 155.844},
      {"EGY", "Egypt", 464.425},
      {"ERI", "Eritrea", 688.889},
      {"ESP", "Spain", 193.863},
      {"EST", "Estonia", 481.224},
      {"ETH", "Ethiopia", 25.187},
      {"FIN", "Finland", 145.541},
      {"FJI", "Fiji", 289.474},
      {"FLK", "Falkland Islands", 500.0},
      {"FRA", "France", 67.39},
      {"FRO", "Faroe Islands", 428.571},
      {"GAB", "Gabon", 397.38},
      {"GBR", "United Kingdom", 268.329},
      {"GEO", "Georgia", 111.551},
      {"GHA", "Ghana", 361.204},
      {"GIN", "Guinea", 208.633},
      {"GMB", "Gambia", 700.0},
      {"GNB", "Guinea-Bissau", 750.0},
      {"GNQ", "Equatorial Guinea", 492.958},
      {"GRC", "Greece", 353.339},
      {"GRD", "Grenada", 714.286},
      {"GRL", "Greenland", 133.333},
      {"GTM", "Guatemala", 320.637},
      {"GUM", "Guam", 670.33},
      {"GUY", "Guyana", 642.276},
      {"HKG", "Hong Kong", 683.972},
      {"HND", "Honduras", 375.104},
      {"HRV", "Croatia", 210.979},
      {"HTI", "Haiti", 606.061},
      {"HUN", "Hungary", 233.037},
      {"IDN", "Indonesia", 623.157},
      {"IND", "India", 637.182},
      {"IRL", "Ireland", 363.608},
      {"IRN", "Iran", 492.678},
      {"IRQ", "Iraq", 498.869},
      {"ISL", "Iceland", 28.557},
      {"ISR", "Israel", 548.03},
      {"ITA", "Italy", 340.794},
      {"JAM", "Jamaica", 519.54},
      {"JOR", "Jordan", 399.909},
      {"JPN", "Japan", 478.545},
      {"KAZ", "Kazakhstan", 641.102},
      {"KEN", "Kenya", 86.221},
      {"KGZ", "Kyrgyzstan", 104.426},
      {"KHM", "Cambodia", 400.46},
      {"KIR", "Kiribati", 666.667},
      {"KNA", "Saint Kitts and Nevis", 681.818},
      {"KOR", "South Korea", 458.081},
      {"KWT", "Kuwait", 489.61},
      {"LAO", "Laos", 242.182},
      {"LBN", "Lebanon", 594.752},
      {"LBR", "Liberia", 304.348},
      {"LBY", "Libya", 550.422},
      {"LCA", "Saint Lucia", 685.714},
      {"LKA", "Sri Lanka", 462.997},
      {"LSO", "Lesotho", 20.0},
      {"LTU", "Lithuania", 244.604},
      {"LUX", "Luxembourg", 186.992},
      {"LVA", "Latvia", 223.932},
      {"MAC", "Macao", 491.525},
      {"MAR", "Morocco", 610.412},
      {"MDA", "Moldova", 638.138},
      {"MDG", "Madagascar", 483.254},
      {"MDV", "Maldives", 651.515},
      {"MEX", "Mexico", 399.852},
      {"MKD", "North Macedonia", 490.018},
      {"MLI", "Mali", 466.077},
      {"MLT", "Malta", 441.441},
      {"MMR", "Myanmar", 344.365},
      {"MNE", "Montenegro", 326.26},
      {"MNG", "Mongolia", 741.573},
      {"MOZ", "Mozambique", 126.633},
      {"MRT", "Mauritania", 526.596},
      {"MSR", "Montserrat", 1000.0},
      {"MUS", "Mauritius", 611.111},
      {"MWI", "Malawi", 133.803},
      {"MYS", "Malaysia", 548.611},
      {"NAM", "Namibia", 63.694},
      {"NCL", "New Caledonia", 610.119},
      {"NER", "Niger", 622.222},
      {"NGA", "Nigeria", 376.987},
      {"NIC", "Nicaragua", 354.212},
      {"NLD", "Netherlands", 388.702},
      {"NOR", "Norway", 27.55},
      {"NPL", "Nepal", 24.51},
      {"NRU", "Nauru", 750.0},
      {"NZL", "New Zealand", 132.427},
      {"OMN", "Oman", 488.238},
      {"PAK", "Pakistan", 366.052},
      {"PAN", "Panama", 192.136},
      {"PER", "Peru", 230.65},
      {"PHL", "Philippines", 580.908},
      {"PNG", "Papua New Guinea", 526.749},
      {"POL", "Poland", 660.122},
      {"PRI", "Puerto Rico", 681.469},
      {"PRK", "North Korea", 157.785},
      {"PRT", "Portugal", 219.053},
      {"PRY", "Paraguay", 25.487},
      {"PSE", "Palestine", 465.116},
      {"PYF", "French Polynesia", 471.429},
      {"QAT", "Qatar", 489.792},
      {"ROU", "Romania", 255.877},
      {"RUS", "Russia", 359.937},
      {"RWA", "Rwanda", 294.118},
      {"SAU", "Saudi Arabia", 571.336},
      {"SDN", "Sudan", 264.014},
      {"SEN", "Senegal", 523.132},
      {"SGP", "Singapore", 487.937},
      {"SLB", "Solomon Islands", 727.273},
      {"SLE", "Sierra Leone", 47.619},
      {"SLV", "El Salvador", 185.976},
      {"SOM", "Somalia", 634.146},
      {"SPM", "Saint Pierre and Miquelon", 800.0},
      {"SRB", "Serbia", 543.565},
      {"SSD", "South Sudan", 684.211},
      {"STP", "Sao Tome and Principe", 600.0},
      {"SUR", "Suriname", 356.436},
      {"SVK", "Slovakia", 169.589},
      {"SVN", "Slovenia", 238.614},
      {"SWE", "Sweden", 45.817},
      {"SWZ", "Eswatini", 189.189},
      {"SYC", "Seychelles", 615.385},
      {"SYR", "Syria", 541.169},
      {"TCA", "Turks and Caicos Islands", 703.704},
      {"TCD", "Chad", 677.419},
      {"TGO", "Togo", 460.317},
      {"THA", "Thailand", 506.635},
      {"TJK", "Tajikistan", 83.629},
      {"TKM", "Turkmenistan", 490.187},
      {"TLS", "East Timor", 698.113},
      {"TON", "Tonga", 625.0},
      {"TTO", "Trinidad and Tobago", 491.409},
      {"TUN", "Tunisia", 468.227},
      {"TUR", "Turkey", 430.401},
      {"TWN", "Taiwan", 573.275},
      {"TZA", "Tanzania", 366.748},
      {"UGA", "Uganda", 52.273},
      {"UKR", "Ukraine", 240.175},
      {"URY", "Uruguay", 147.282},
      {"USA", "United States", 379.26},
      {"UZB", "Uzbekistan", 505.405},
      {"VCT", "Saint Vincent and the Grenadines", 500.0},
      {"VEN", "Venezuela", 212.476},
      {"VGB", "British Virgin Islands", 714.286},
      {"VIR", "United States Virgin Islands", 685.714},
      {"VNM", "Vietnam", 448.217},
      {"VUT", "Vanuatu", 571.429},
      {"WSM", "Samoa", 470.588},
      {"YEM", "Yemen", 543.909},
      {"ZAF", "South Africa", 715.681},
      {"ZMB", "Zambia", 84.698},
      {"ZWE", "Zimbabwe", 392.279},
  };
  return table;
}

std::optional<CountryIntensity> find_country(std::string_view code) {
  const std::string c = upper(code);
  const auto& t = country_intensities();
  auto it =
      std::lower_bound(t.begin(), t.end(), c, [](const CountryIntensity& e, const std::string& k) {
        return std::string_view(e.iso_code) < k;
      });
  if (it != t.end() && c == it->iso_code) return *it;
  return std::nullopt;
}

CountryIntensity country_or_throw(std::string_view code, std::string_view set_by) {
  if (auto e = find_country(code)) return *e;
  const std::string c = upper(code);
  std::vector<std::string> near;
  for (const CountryIntensity& e : country_intensities()) {
    const std::string iso = e.iso_code, name = upper(e.name);
    const bool close = (c.size() == 3 && edits(c, iso) <= 1) ||
                       (c.size() == 2 && iso.compare(0, 2, c) == 0) ||
                       (c.size() >= 3 && name.compare(0, c.size(), c) == 0);
    if (close) near.push_back(fmt::format("{} ({})", e.iso_code, e.name));
  }
  if (near.size() > 8) near.resize(8);
  std::string list;
  for (auto& n : near) list += (list.empty() ? "" : ", ") + n;
  std::string shown(code.substr(0, 40));
  throw Error(fmt::format(
      "{}: unknown country code '{}'; expected an ISO 3166-1 alpha-3 code such as DEU, FRA, USA "
      "({} countries in {}){}",
      set_by, shown, country_intensities().size(), kCountryIntensitySource,
      list.empty() ? "" : "; near matches: " + list));
}

}  // namespace gt::energy
