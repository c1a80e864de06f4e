//! [`series!`](crate::series): the enum of the things a lab compares, declared
//! once with each variant's name beside it.
//!
//! Every lab compares a handful of setups, and each of them needs the same
//! four things: the enum, the list of all variants in the order the charts
//! show them, the lowercase name a record carries, and [`Series`](crate::Series)
//! so that a record can be built from it. Written by hand that is thirty lines
//! of matches a lab, and a name can drift between `name()` and `series()`.

/// Declares a fieldless enum of compared things with `ALL`, `name()`,
/// `named()` and [`Series`](crate::Series).
///
/// ```
/// lab_kit::series! {
///     /// How the server logs a request whose client left.
///     pub enum AccessLog in "count" {
///         /// The access log of tower-http.
///         TraceLayer => "trace-layer",
///         /// A drop guard that writes 499.
///         AbortAs499 => "abort-as-499",
///     }
/// }
///
/// use lab_kit::Series;
/// assert_eq!(AccessLog::ALL, [AccessLog::TraceLayer, AccessLog::AbortAs499]);
/// assert_eq!(AccessLog::AbortAs499.name(), "abort-as-499");
/// assert_eq!(AccessLog::AbortAs499.series(), "count/abort-as-499");
/// ```
///
/// Without `in "family"` the series is the name itself. The enum derives
/// `Debug, Clone, Copy, PartialEq, Eq`; more attributes may be written above
/// it.
#[macro_export]
macro_rules! series {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident $(in $family:literal)? {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant, in the order the charts and tables show them.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The lowercase name a record and a chart legend carry.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The variant of this name, if there is one.
            pub fn named(text: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|variant| variant.name() == text)
            }
        }

        impl $crate::Series for $name {
            fn series(&self) -> String {
                let family: &str = concat!($($family, "/")?);
                format!("{family}{}", self.name())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::Series;

    crate::series! {
        enum Plain {
            One => "one",
            TwoWords => "two-words",
        }
    }

    crate::series! {
        /// A documented enum in a family.
        pub(crate) enum InFamily in "fam" {
            /// A documented variant.
            Only => "only",
        }
    }

    #[test]
    fn without_a_family_the_series_is_the_name() {
        assert_eq!(Plain::ALL, [Plain::One, Plain::TwoWords]);
        assert_eq!(Plain::TwoWords.name(), "two-words");
        assert_eq!(Plain::TwoWords.series(), "two-words");
        assert_eq!(Plain::named("two-words"), Some(Plain::TwoWords));
        assert_eq!(Plain::named("three"), None);
    }

    #[test]
    fn a_family_prefixes_the_series_but_not_the_name() {
        assert_eq!(InFamily::ALL.len(), 1);
        assert_eq!(InFamily::Only.name(), "only");
        assert_eq!(InFamily::Only.series(), "fam/only");
        assert_eq!(InFamily::named("fam/only"), None, "a name has no family");
    }
}
